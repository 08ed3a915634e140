package store

// LoadChunk is how many notifications Load writes in one transaction.
const LoadChunk = loadChunk
