-- brain schema v8: which transaction last changed what the lexical leg ranks by, so a gateway's
-- in-memory copy of the BM25 weights (brain/store/lexical_mirror.py) reads only the rows changed since
-- its last look. A row is stamped with its writer's transaction id on insert and on any update that
-- sets a column the leg's candidates depend on (text, weights, status, namespace, kind); access counts
-- and the vector columns do not stamp it. A reader keeps the snapshot it last read at and asks for
-- rows stamped at or past that snapshot's xmax, or by a transaction it saw in progress: that misses no
-- commit, whatever order transactions commit in.
--
-- Additive: a nullable column (NULL on every row written before this version, which a mirror's full
-- load reads), a partial index of the stamped rows and a trigger; a previous release neither reads
-- nor writes the column, and its writes are stamped by the trigger all the same.
ALTER TABLE memories ADD COLUMN IF NOT EXISTS lexical_xid xid8;

-- (stamp, id): a reader pages through a bulk change by that keyset.
CREATE INDEX IF NOT EXISTS memories_lexical_xid ON memories (lexical_xid, id) WHERE lexical_xid IS NOT NULL;

CREATE OR REPLACE FUNCTION brain_lexical_xid() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.lexical_xid := pg_current_xact_id();
  RETURN NEW;
END $$;

DROP TRIGGER IF EXISTS memories_lexical_xid ON memories;
CREATE TRIGGER memories_lexical_xid BEFORE INSERT OR UPDATE OF title, body, tags, bm25, status, namespace, kind
  ON memories FOR EACH ROW EXECUTE FUNCTION brain_lexical_xid();
