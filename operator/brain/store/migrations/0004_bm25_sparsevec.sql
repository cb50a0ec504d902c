-- brain schema v4: each memory keeps its BM25 document-side weights as a sparsevec, so the lexical
-- leg scores a candidate with one inner product against the query's IDF vector (computed in C)
-- instead of unnesting its tsvector (brain/store/lexical.py; docs/memory-core.md, "Lexical leg").
-- Additive: existing rows get NULL weights here and are filled in batches by the store
-- (brain/store/lexical_weights.py), the lexical leg computing a NULL row's weights on the fly
-- meanwhile, so a store ranks the same before, during and after the backfill.

-- A lexeme's dimension: the first 32 bits of its md5, modulo the largest prime below pgvector's
-- 10^9-dimension limit. md5 rather than hashtext because it never changes with the server version.
-- Two lexemes sharing a dimension have their weights summed (see docs/performance.md for how
-- often that happens).
CREATE FUNCTION brain_lexeme_dim(lexeme text) RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT (('x' || left(md5(lexeme), 8))::bit(32)::bigint % 999999937)::integer + 1 $$;

-- BM25's document side (k1 1.2, b 0.3) for each lexeme of `tsv` against the reference length `ref`:
-- tf·(k1+1) / (tf + k1·(1−b+b·len/ref)), where tf counts the lexeme's positions and len its distinct
-- lexemes, as the tsvector SQL did. pgvector stores at most 16,000 non-zero elements: a memory with
-- more distinct lexemes (a 32 KB body of unique tokens) keeps its 16,000 heaviest.
CREATE FUNCTION brain_bm25_doc(tsv tsvector, ref float8) RETURNS sparsevec
  LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT format('{%s}/999999937', string_agg(dim || ':' || w, ','))::sparsevec
    FROM (SELECT dim, sum(w) AS w
            FROM (SELECT brain_lexeme_dim(u.lexeme) AS dim,
                         tf * 2.2 / (tf + 1.2 * (0.7 + 0.3 * length(tsv) / ref)) AS w
                    FROM unnest(tsv) u
                   CROSS JOIN LATERAL (SELECT coalesce(array_length(u.positions, 1), 1)::float8 AS tf) t) x
           GROUP BY dim ORDER BY sum(w) DESC, dim LIMIT 16000) y
$$;

-- The reference length every stored weight was computed with (`bm25_avgdl` in brain_meta). The
-- first write of an empty brain claims its own length; the store moves it to the live mean when
-- the two drift apart and rewrites the column (brain/store/lexical_weights.py).
CREATE FUNCTION brain_bm25_reference(claim float8) RETURNS float8 LANGUAGE plpgsql VOLATILE AS $$
DECLARE ref float8;
BEGIN
  SELECT value::float8 INTO ref FROM brain_meta WHERE key = 'bm25_avgdl';
  IF ref IS NULL THEN
    INSERT INTO brain_meta (key, value) VALUES ('bm25_avgdl', greatest(claim, 1)::text)
      ON CONFLICT (key) DO NOTHING;
    SELECT value::float8 INTO ref FROM brain_meta WHERE key = 'bm25_avgdl';  -- a concurrent claim may have won
  END IF;
  RETURN ref;
END $$;

ALTER TABLE memories ADD COLUMN bm25 sparsevec(999999937);

-- Every write path (notes, ingest, capture, supersede, import, reindex) inserts through here. A
-- BEFORE trigger cannot read the generated `tsv`, so it builds the same tsvector from the same
-- columns (the expression is migration 0001's; tests/test_lexical.py checks the two agree). Weights
-- a caller supplies are replaced, never trusted.
CREATE FUNCTION brain_bm25_weights() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE tsv tsvector := setweight(to_tsvector('english', coalesce(NEW.title, '')), 'A')
                        || setweight(to_tsvector('english', NEW.body), 'B')
                        || setweight(to_tsvector('simple', brain_tags_text(NEW.tags)), 'C');
BEGIN
  NEW.bm25 := brain_bm25_doc(tsv, brain_bm25_reference(length(tsv)));
  RETURN NEW;
END $$;
CREATE TRIGGER memories_bm25 BEFORE INSERT OR UPDATE OF title, body, tags ON memories
  FOR EACH ROW EXECUTE FUNCTION brain_bm25_weights();

-- Existing rows: the reference is their live mean, and all of them are due for a rewrite (the
-- cursor `bm25_rewrite_after` is the last id rewritten; '' = from the start; absent = nothing due).
INSERT INTO brain_meta (key, value)
  SELECT 'bm25_avgdl', greatest(coalesce(avg(length(tsv)) FILTER (WHERE status = 'active'), avg(length(tsv))), 1)::text
    FROM memories HAVING count(*) > 0;
INSERT INTO brain_meta (key, value) SELECT 'bm25_rewrite_after', '' WHERE EXISTS (SELECT 1 FROM memories);

-- One batch of the rewrite: the next `batch` rows after the cursor get weights at the current
-- reference, and the cursor moves on (or is removed after the last row). Each call is its own
-- short transaction; -1 when another session holds the rewrite, 0 when nothing is due. It reads
-- the stored `tsv` (no re-parse) and fires no trigger (only `bm25` is set).
CREATE FUNCTION brain_bm25_rewrite(batch integer) RETURNS integer LANGUAGE plpgsql VOLATILE AS $$
DECLARE after_id text; last_id text; n integer; ref float8;
BEGIN
  IF NOT pg_try_advisory_xact_lock(hashtext('brain_bm25_rewrite')) THEN
    RETURN -1;
  END IF;
  SELECT value INTO after_id FROM brain_meta WHERE key = 'bm25_rewrite_after';
  IF after_id IS NULL THEN
    RETURN 0;
  END IF;
  ref := brain_bm25_reference(1);
  WITH b AS (SELECT id FROM memories WHERE id > after_id ORDER BY id LIMIT batch),
       u AS (UPDATE memories m SET bm25 = brain_bm25_doc(m.tsv, ref) FROM b WHERE m.id = b.id RETURNING m.id)
  SELECT max(id), count(*) INTO last_id, n FROM u;
  IF n < batch THEN
    DELETE FROM brain_meta WHERE key = 'bm25_rewrite_after';
  ELSE
    UPDATE brain_meta SET value = last_id WHERE key = 'bm25_rewrite_after';
  END IF;
  RETURN n;
END $$;
