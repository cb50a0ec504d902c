-- brain schema v6: each lexeme's highest term frequency in any memory the lexical leg may score, so
-- its MaxScore bound is per term (brain/store/lexical.py, `Term.bound`) rather than k1 + 1 = 2.2 for
-- every term. A document-side weight is tf·2.2 / (tf + 1.2·(0.7 + 0.3·len/ref)) < tf·2.2 / (tf + 0.84)
-- at any length and reference, so `max_tf` bounds a term's weight without depending on the reference
-- length the weights were computed at (it moves; migration 0004). Measured on the copied LoCoMo corpus:
-- the leg alone p50 / p95 −17 % / −12 % at 100k memories and −40 % / −33 % at 1M, the ranking
-- unchanged (docs/performance.md, "The lexical leg at 1M, rerun").
--
-- `max_tf` only grows: a deleted or forgotten memory's counts stay in it, which keeps it a bound. It
-- covers every version that is written (superseded and retired ones too: `as_of` scopes score
-- history), while `df` still counts active memories only. NULL (a lexeme written by a build before
-- this one, during a rolling upgrade) falls back to the 2.2 bound. Additive: one nullable column and
-- the trigger's function; a previous release neither reads the column nor writes the table itself.
ALTER TABLE lexeme_stats ADD COLUMN max_tf integer;

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
        SET df = s.df + EXCLUDED.df, max_tf = greatest(s.max_tf, EXCLUDED.max_tf);
  END IF;
  RETURN NULL;
END $$;

-- What is stored already: every version the leg may score (forgotten ones never are).
INSERT INTO lexeme_stats AS s (lexeme, df, max_tf)
  SELECT u.lexeme, 0, max(coalesce(array_length(u.positions, 1), 1))
    FROM memories m, unnest(m.tsv) u
   WHERE m.status <> 'forgotten'
   GROUP BY u.lexeme
  ON CONFLICT (lexeme) DO UPDATE SET max_tf = EXCLUDED.max_tf;
