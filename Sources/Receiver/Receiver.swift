// Receiver
