-- brain schema v2: memories recorded together (one conversation, one session, one exchange) share an
-- episode, ordered by seq. Retrieval lets an entry borrow relevance from its episode and its
-- neighbours (docs/memory-core.md, "Episode context"). Additive: existing rows keep a NULL episode.
ALTER TABLE memories ADD COLUMN episode text, ADD COLUMN seq integer;
CREATE INDEX memories_episode ON memories (episode, seq) WHERE episode IS NOT NULL;
