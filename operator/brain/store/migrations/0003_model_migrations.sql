-- brain schema v3: the live index belongs to one embedding model, recorded in brain_meta, and a
-- model change is a reindex into a column beside the live one (brain/store/reindex.py).
-- Additive: vectors already stored keep their column; the model the brain had is the one most of
-- them came from (older builds could write another model's vectors into the same column: those rows
-- are no longer compared and `brainctl reindex` re-embeds them).
INSERT INTO brain_meta (key, value)
  SELECT 'embedding_model', coalesce(
    (SELECT embedding_model FROM memories WHERE embedding IS NOT NULL AND embedding_model IS NOT NULL
      GROUP BY embedding_model ORDER BY count(*) DESC, embedding_model LIMIT 1), '')
  ON CONFLICT (key) DO NOTHING;

-- The live model; a brain that has none yet (new, or no vector so far) takes the model of its first
-- vector. Claimed by a write, never by opening a connection: a tool that only manages keys must not
-- decide which model the index is built by.
CREATE FUNCTION brain_live_model(claim text) RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE live text;
BEGIN
  SELECT value INTO live FROM brain_meta WHERE key = 'embedding_model';
  IF coalesce(live, '') = '' AND claim IS NOT NULL THEN
    UPDATE brain_meta SET value = claim WHERE key = 'embedding_model' AND value = '';
    SELECT value INTO live FROM brain_meta WHERE key = 'embedding_model';  -- a concurrent claim may have won
  END IF;
  RETURN live;
END $$;

-- A vector is stored only with the name of the model that made it, and only when that model is the
-- brain's live one; anything else is stored without a vector (the backfill embeds it), never mixed in.
CREATE FUNCTION brain_vector_model_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.embedding IS NOT NULL AND (NEW.embedding_model IS NULL
       OR NEW.embedding_model IS DISTINCT FROM brain_live_model(NEW.embedding_model)) THEN
    NEW.embedding := NULL;
    NEW.embedding_model := NULL;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER memories_vector_model BEFORE INSERT OR UPDATE OF embedding, embedding_model ON memories
  FOR EACH ROW EXECUTE FUNCTION brain_vector_model_check();

-- Whether `model` is the live one, asked by a writer just before it stores a vector. The ROW
-- EXCLUSIVE lock is what the insert takes anyway; taking it first means a reindex swap (which
-- locks the table) is either wholly before this answer or waits until the writer commits.
CREATE FUNCTION brain_vector_model_live(model text) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  LOCK TABLE memories IN ROW EXCLUSIVE MODE;
  RETURN coalesce(brain_live_model(model) = model, false);
END $$;

CREATE TABLE reindex_runs (
  id          bigserial PRIMARY KEY,
  from_model  text NOT NULL,
  to_model    text NOT NULL,
  to_dim      integer NOT NULL CHECK (to_dim BETWEEN 1 AND 16000),
  status      text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'swapped', 'abandoned')),
  total       integer NOT NULL DEFAULT 0,
  done        integer NOT NULL DEFAULT 0,
  started_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz
);
CREATE UNIQUE INDEX reindex_runs_one_running ON reindex_runs (status) WHERE status = 'running';
