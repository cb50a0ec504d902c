-- brain schema v7: what an import embedded, when it is not the entry's title and body. A code chunk
-- is embedded as its card (name, docstring gist, the code's start: ~400 characters), a skill as its
-- name and description, a persona as its name, description and identity; every other entry as
-- its title and body. Until now a model migration (`brainctl reindex`) and the gateway's mend
-- embedded title and body for every row, so after a migration code, skills and personas were
-- ranked by other text than before, at ~7x the embedding cost for code. Reindex and mend now embed
-- `coalesce(embed_input, title + body)`; a purge clears it with the text. NULL for every row
-- written before this version: the next import that changes such an entry stores it, and until
-- then it is embedded as before. Additive: a nullable column, no rewrite of the table.
ALTER TABLE memories ADD COLUMN IF NOT EXISTS embed_input text;
