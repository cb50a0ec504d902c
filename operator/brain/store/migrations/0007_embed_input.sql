-- brain schema v7: what an import embedded, when it is not the entry's title and body. A code chunk
-- is embedded as its card (name, docstring gist, the code's start: ~400 characters), a skill as its
-- name and description, a persona as its name, description and identity; every other entry as
-- its title and body. Until now a model migration (`brainctl reindex`) and the gateway's mend
-- embedded title and body for every row, so after a migration code, skills and personas were
-- ranked by other text than before, at ~7x the embedding cost for code. Reindex and mend now embed
-- `coalesce(embed_input, title + body)`. NULL for every row written before this version: the next
-- import that changes such an entry stores it, and until then it is embedded as before. Additive: a
-- nullable column, no rewrite of the table.
--
-- A purge must take this text too. The trigger clears it on any update that marks a row purged
-- (`attrs ? 'purged_by'`), so a purge by the previous release, which does not know the column,
-- running beside this one during a rolling upgrade or after a rollback, leaves nothing behind.
ALTER TABLE memories ADD COLUMN IF NOT EXISTS embed_input text;

CREATE OR REPLACE FUNCTION brain_purge_embed_input() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.embed_input := NULL;
  RETURN NEW;
END $$;

DROP TRIGGER IF EXISTS memories_purge_embed_input ON memories;
CREATE TRIGGER memories_purge_embed_input BEFORE UPDATE ON memories FOR EACH ROW
  WHEN (NEW.attrs ? 'purged_by' AND NEW.embed_input IS NOT NULL)
  EXECUTE FUNCTION brain_purge_embed_input();
