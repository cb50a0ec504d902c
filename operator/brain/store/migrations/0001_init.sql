-- brain schema v1. `{dim}` is the embedding dimension, fixed when the database is created.
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE brain_meta (
  key   text PRIMARY KEY,
  value text NOT NULL
);

-- array_to_string is only STABLE; tags never depend on settings, so this wrapper is safely IMMUTABLE.
CREATE FUNCTION brain_tags_text(text[]) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
  AS $$ SELECT array_to_string($1, ' ') $$;

CREATE TABLE memories (
  id               text PRIMARY KEY,
  lineage_id       text NOT NULL,
  version          integer NOT NULL DEFAULT 1,
  kind             text NOT NULL,
  namespace        text NOT NULL,
  tier             text NOT NULL DEFAULT 'episodic' CHECK (tier IN ('episodic', 'curated')),
  origin           text NOT NULL CHECK (origin IN ('owner', 'agent', 'import', 'untrusted', 'gateway')),
  author           text NOT NULL,
  title            text NOT NULL DEFAULT '',
  body             text NOT NULL,
  tags             text[] NOT NULL DEFAULT '{}',
  attrs            jsonb NOT NULL DEFAULT '{}',
  source_key       text,
  content_hash     text NOT NULL,
  valid_from       timestamptz NOT NULL DEFAULT now(),
  valid_to         timestamptz,
  supersedes       text REFERENCES memories (id),
  status           text NOT NULL DEFAULT 'active'
                   CHECK (status IN ('active', 'superseded', 'forgotten', 'retired')),
  status_reason    text,
  importance       real NOT NULL DEFAULT 0.5 CHECK (importance BETWEEN 0 AND 1),
  standing         boolean NOT NULL DEFAULT false,
  required         boolean NOT NULL DEFAULT false,
  access_count     integer NOT NULL DEFAULT 0,
  last_accessed_at timestamptz,
  promoted_by      text,
  promoted_at      timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  domain_keywords  text[] NOT NULL DEFAULT '{}',
  embedding        vector({dim}),
  embedding_model  text,
  tsv              tsvector GENERATED ALWAYS AS (
                     setweight(to_tsvector('english', coalesce(title, '')), 'A')
                     || setweight(to_tsvector('english', body), 'B')
                     || setweight(to_tsvector('simple', brain_tags_text(tags)), 'C')
                   ) STORED
);

-- One active version per lineage; the history is every row of the lineage.
CREATE UNIQUE INDEX memories_lineage_active ON memories (lineage_id) WHERE status = 'active';
CREATE INDEX memories_lineage ON memories (lineage_id, version);
CREATE INDEX memories_scope ON memories (namespace, status, created_at DESC);
CREATE INDEX memories_hash ON memories (namespace, content_hash) WHERE status = 'active';
CREATE INDEX memories_source ON memories (source_key) WHERE source_key IS NOT NULL AND status = 'active';
CREATE INDEX memories_standing ON memories (namespace) WHERE (standing OR required) AND status = 'active';
CREATE INDEX memories_tsv ON memories USING gin (tsv);
CREATE INDEX memories_trgm ON memories USING gin (body gin_trgm_ops);
CREATE INDEX memories_keywords ON memories USING gin (domain_keywords);
CREATE INDEX memories_embedding ON memories USING hnsw (embedding vector_cosine_ops)
  WITH (m = 16, ef_construction = 64);

-- Document frequency per lexeme, for IDF-weighted lexical scoring (maintained by trigger).
CREATE TABLE lexeme_stats (
  lexeme text PRIMARY KEY,
  df     integer NOT NULL
);

CREATE FUNCTION brain_lexeme_df() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status = 'active' THEN
    UPDATE lexeme_stats s SET df = s.df - 1 FROM unnest(tsvector_to_array(OLD.tsv)) AS l(lexeme)
     WHERE s.lexeme = l.lexeme;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.status = 'active' THEN
    INSERT INTO lexeme_stats AS s (lexeme, df)
      SELECT l.lexeme, 1 FROM unnest(tsvector_to_array(NEW.tsv)) AS l(lexeme)
      ON CONFLICT (lexeme) DO UPDATE SET df = s.df + 1;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER memories_lexeme_df AFTER INSERT OR DELETE OR UPDATE OF status, body, title, tags ON memories
  FOR EACH ROW EXECUTE FUNCTION brain_lexeme_df();

CREATE TABLE edges (
  source_id  text NOT NULL,
  target_id  text NOT NULL,
  relation   text NOT NULL,
  confidence real NOT NULL DEFAULT 1.0 CHECK (confidence BETWEEN 0 AND 1),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (source_id, target_id, relation)
);
CREATE INDEX edges_target ON edges (target_id);

CREATE TABLE keys (
  id           text PRIMARY KEY,
  name         text NOT NULL UNIQUE,
  key_hash     text NOT NULL UNIQUE,
  role         text NOT NULL CHECK (role IN ('read', 'agent', 'owner')),
  namespaces   text[],
  expires_at   timestamptz,
  created_at   timestamptz NOT NULL DEFAULT now(),
  revoked_at   timestamptz,
  last_used_at timestamptz
);

CREATE TABLE events (
  id         bigserial PRIMARY KEY,
  type       text NOT NULL,
  key_name   text,
  namespace  text,
  payload    jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_type_time ON events (type, created_at);

CREATE TABLE proposals (
  id          text PRIMARY KEY,
  status      text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'rejected')),
  kind        text NOT NULL,
  namespace   text NOT NULL,
  title       text NOT NULL DEFAULT '',
  body        text NOT NULL,
  supersedes  text REFERENCES memories (id),
  evidence    jsonb NOT NULL DEFAULT '[]',
  authors     text[] NOT NULL DEFAULT '{}',
  score       real NOT NULL DEFAULT 0,
  created_at  timestamptz NOT NULL DEFAULT now(),
  decided_by  text,
  decided_at  timestamptz,
  reason      text,
  memory_id   text REFERENCES memories (id)
);
CREATE INDEX proposals_status ON proposals (status, created_at);

CREATE TABLE job_runs (
  id          bigserial PRIMARY KEY,
  job         text NOT NULL,
  source      text,
  started_at  timestamptz NOT NULL DEFAULT now(),
  finished_at timestamptz,
  status      text NOT NULL DEFAULT 'running',
  summary     jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX job_runs_job ON job_runs (job, finished_at DESC);
