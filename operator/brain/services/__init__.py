"""The governed doors: every write to memory, proposals and keys passes one of these."""
