// Providers
