-- Provisioning runs as a durable job (pg-boss, schema "pgboss", created by pg-boss itself):
-- the session shows the attempt, the job and the last error.
ALTER TABLE "Session" ADD COLUMN "provisioningAttempts" INTEGER NOT NULL DEFAULT 0;
ALTER TABLE "Session" ADD COLUMN "provisioningJobId" TEXT;
ALTER TABLE "Session" ADD COLUMN "provisioningError" TEXT;

-- LOCAL sandbox entry processes, visible to every server process on the host (cross-process stop
-- and the orphan reconciler). host = hostname + boot id: a pid means nothing on another host or boot.
CREATE TABLE "LocalSandboxProcess" (
    "providerSandboxId" TEXT NOT NULL,
    "host" TEXT NOT NULL,
    "pid" INTEGER NOT NULL,
    "startTicks" TEXT NOT NULL,
    "sessionId" UUID,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "LocalSandboxProcess_pkey" PRIMARY KEY ("providerSandboxId")
);
CREATE INDEX "LocalSandboxProcess_host_idx" ON "LocalSandboxProcess"("host");
