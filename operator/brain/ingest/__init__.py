"""Turning a MemorySource into entries: fetch (git), parse (markdown, skills, personas, code), grade, sync.

Parsers and graders are pure functions over text, so they are tested without a database; `sync`
is the one place that compares with what is stored and writes through the store.
"""
