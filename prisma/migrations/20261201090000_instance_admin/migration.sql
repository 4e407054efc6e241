-- The instance admin creates accounts (R-ACC-1). On an existing install that is the bootstrap
-- user: the first user ever created.
ALTER TABLE "User" ADD COLUMN "instanceAdmin" BOOLEAN NOT NULL DEFAULT false;

UPDATE "User" SET "instanceAdmin" = true
WHERE "id" = (SELECT "id" FROM "User" ORDER BY "createdAt", "id" LIMIT 1);
