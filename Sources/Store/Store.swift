// Store
