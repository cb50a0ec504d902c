-- brain schema v4: a postings table for the lexical leg's BM25 (docs/memory-core.md, "Lexical leg").
-- Scoring used to unnest every candidate's tsvector to find the query's terms in it; a posting per
-- (lexeme, memory) with its term frequency and the memory's length answers the same from an index.
-- Maintained by trigger, like lexeme_stats; every version is kept (point-in-time reads score history).
-- Additive: the backfill below fills it for existing memories.
CREATE TABLE postings (
  lexeme    text    NOT NULL,
  memory_id text    NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
  tf        integer NOT NULL,
  doc_len   integer NOT NULL,
  PRIMARY KEY (lexeme, memory_id)
);
CREATE INDEX postings_memory ON postings (memory_id);

CREATE FUNCTION brain_postings() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' THEN
    DELETE FROM postings WHERE memory_id = OLD.id;
  END IF;
  INSERT INTO postings (lexeme, memory_id, tf, doc_len)
    SELECT u.lexeme, NEW.id, coalesce(array_length(u.positions, 1), 1), length(NEW.tsv)
      FROM unnest(NEW.tsv) AS u;
  RETURN NULL;
END $$;

CREATE TRIGGER memories_postings AFTER INSERT OR UPDATE OF body, title, tags ON memories
  FOR EACH ROW EXECUTE FUNCTION brain_postings();

INSERT INTO postings (lexeme, memory_id, tf, doc_len)
  SELECT u.lexeme, m.id, coalesce(array_length(u.positions, 1), 1), length(m.tsv)
    FROM memories m, unnest(m.tsv) AS u;
