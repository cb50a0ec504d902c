-- brain schema v6: each lexeme's highest term frequency in any memory the lexical leg may score, so
-- its MaxScore bound is per term (brain/store/lexical.py, `Term.weight_bound`) rather than k1 + 1 = 2.2
-- for every term. A document-side weight is tf·2.2 / (tf + 1.2·(0.7 + 0.3·len/ref)) < tf·2.2 / (tf + 0.84)
-- at any length and reference, so `max_tf` bounds a term's weight without depending on the reference
-- length the weights were computed at (it moves; migration 0004). Two lexemes on one dimension have
-- their weights summed, so the leg bounds a dimension by the sum over every lexeme on it, found through
-- `lexeme_stats_dim`. Measured on the copied LoCoMo corpus: the leg alone p50 / p95 −17 % / −12 % at 100k
-- memories and −40 % / −33 % at 1M, the ranking unchanged (docs/performance.md, "The lexical leg at 1M,
-- rerun").
--
-- `max_tf` only grows: a superseded, deleted or forgotten memory's counts stay in it, which keeps it a
-- bound (`as_of` scopes score history). `df` still counts active memories only. NULL (not known) falls
-- back to the 2.2 bound; a NULL on a lexeme active memories hold is kept (a later write must not set
-- it from its own count alone). After the count below, NULL is left only on lexemes that forgotten
-- memories alone hold, which no scope scores.
--
-- Writes wait while this runs: `memories` is locked against them first, so no write can fire the old
-- trigger after the count below was taken (a rolling upgrade's older pods keep writing). The count runs
-- before `lexeme_stats` is altered, so retrieval reads it meanwhile (8 s at 1M copied LoCoMo memories);
-- the last steps (every lexeme's row, the index) hold `lexeme_stats`, so the lexical leg waits for
-- them, for a time that grows with the vocabulary. A lock it cannot get within 5 s (a long transaction,
-- a backup's pg_dump) fails the migration instead of queueing every write behind it; the gateway's
-- migrate init container retries. Additive: one nullable column, one index and the trigger's
-- function; a previous release neither reads the column nor writes the table itself.
SET LOCAL lock_timeout = '5s';
LOCK TABLE memories IN SHARE ROW EXCLUSIVE MODE;

-- A plain table, dropped below: the migrating role may not create temporary ones (brain/store/roles.py).
CREATE UNLOGGED TABLE lexeme_max_tf AS
  SELECT u.lexeme, max(coalesce(array_length(u.positions, 1), 1)) AS max_tf
    FROM memories m, unnest(m.tsv) u
   WHERE m.status <> 'forgotten'
   GROUP BY u.lexeme;

ALTER TABLE lexeme_stats ADD COLUMN max_tf integer;

INSERT INTO lexeme_stats AS s (lexeme, df, max_tf)
  SELECT lexeme, 0, max_tf FROM lexeme_max_tf
  ON CONFLICT (lexeme) DO UPDATE SET max_tf = EXCLUDED.max_tf;

DROP TABLE lexeme_max_tf;

CREATE INDEX lexeme_stats_dim ON lexeme_stats (brain_lexeme_dim(lexeme));

CREATE OR REPLACE FUNCTION brain_lexeme_df() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status = 'active' THEN
    UPDATE lexeme_stats s SET df = s.df - 1 FROM unnest(tsvector_to_array(OLD.tsv)) AS l(lexeme)
     WHERE s.lexeme = l.lexeme;
  END IF;
  -- A status change of an unchanged text adds nothing to `max_tf`: its lexemes were counted when written.
  IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND (NEW.status = 'active' OR NEW.tsv IS DISTINCT FROM OLD.tsv)) THEN
    INSERT INTO lexeme_stats AS s (lexeme, df, max_tf)
      SELECT u.lexeme, (NEW.status = 'active')::integer, coalesce(array_length(u.positions, 1), 1)
        FROM unnest(NEW.tsv) u
      ON CONFLICT (lexeme) DO UPDATE
        SET df = s.df + EXCLUDED.df,
            max_tf = CASE WHEN s.max_tf IS NULL AND s.df > 0 THEN NULL
                          ELSE greatest(s.max_tf, EXCLUDED.max_tf) END;
  END IF;
  RETURN NULL;
END $$;
