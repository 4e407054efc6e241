-- The DOCKER provider (sandboxes as containers through the Docker Engine API) and the image
-- builder's output kept with its snapshot.
ALTER TYPE "Provider" ADD VALUE 'DOCKER';
ALTER TABLE "Snapshot" ADD COLUMN "buildLog" TEXT;
