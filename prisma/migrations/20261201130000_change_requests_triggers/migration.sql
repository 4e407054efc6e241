-- CreateEnum
CREATE TYPE "ChangeRequestStatus" AS ENUM ('OPEN', 'MERGED', 'CLOSED');

-- CreateEnum
CREATE TYPE "MergeMethod" AS ENUM ('MERGE', 'SQUASH', 'FAST_FORWARD');

-- CreateEnum
CREATE TYPE "TriggerKind" AS ENUM ('WEBHOOK', 'SCHEDULE');

-- CreateEnum
CREATE TYPE "TriggerRunStatus" AS ENUM ('SESSION_CREATED', 'SKIPPED_LIMIT', 'FAILED');

-- CreateTable
CREATE TABLE "ChangeRequest" (
    "id" UUID NOT NULL,
    "accountId" UUID NOT NULL,
    "projectId" UUID NOT NULL,
    "sessionId" UUID NOT NULL,
    "title" TEXT NOT NULL,
    "description" TEXT NOT NULL DEFAULT '',
    "status" "ChangeRequestStatus" NOT NULL DEFAULT 'OPEN',
    "headRef" TEXT NOT NULL,
    "baseRef" TEXT NOT NULL,
    "headCommit" TEXT NOT NULL,
    "baseCommit" TEXT NOT NULL,
    "mergeCommit" TEXT,
    "mergeMethod" "MergeMethod",
    "filesChanged" INTEGER NOT NULL DEFAULT 0,
    "additions" INTEGER NOT NULL DEFAULT 0,
    "deletions" INTEGER NOT NULL DEFAULT 0,
    "mergeable" BOOLEAN NOT NULL DEFAULT true,
    "conflicts" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "createdById" UUID,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,
    "mergedAt" TIMESTAMP(3),
    "closedAt" TIMESTAMP(3),

    CONSTRAINT "ChangeRequest_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Trigger" (
    "id" UUID NOT NULL,
    "accountId" UUID NOT NULL,
    "projectId" UUID NOT NULL,
    "userId" UUID,
    "name" TEXT NOT NULL,
    "kind" "TriggerKind" NOT NULL,
    "schedule" TEXT,
    "prompt" TEXT,
    "baseRef" TEXT,
    "templateSlug" TEXT,
    "agent" TEXT,
    "webhookSecretEnc" TEXT,
    "paused" BOOLEAN NOT NULL DEFAULT false,
    "nextFireAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "Trigger_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "TriggerRun" (
    "id" UUID NOT NULL,
    "triggerId" UUID NOT NULL,
    "status" "TriggerRunStatus" NOT NULL,
    "sessionId" UUID,
    "reason" TEXT,
    "signature" TEXT,
    "scheduledFor" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "TriggerRun_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "ChangeRequest_projectId_createdAt_idx" ON "ChangeRequest"("projectId", "createdAt");

-- CreateIndex
CREATE INDEX "ChangeRequest_sessionId_status_idx" ON "ChangeRequest"("sessionId", "status");

-- CreateIndex
CREATE INDEX "Trigger_kind_paused_nextFireAt_idx" ON "Trigger"("kind", "paused", "nextFireAt");

-- CreateIndex
CREATE UNIQUE INDEX "Trigger_projectId_name_key" ON "Trigger"("projectId", "name");

-- CreateIndex
CREATE INDEX "TriggerRun_triggerId_createdAt_idx" ON "TriggerRun"("triggerId", "createdAt");

-- CreateIndex
CREATE UNIQUE INDEX "TriggerRun_triggerId_signature_key" ON "TriggerRun"("triggerId", "signature");

-- CreateIndex
CREATE UNIQUE INDEX "TriggerRun_triggerId_scheduledFor_key" ON "TriggerRun"("triggerId", "scheduledFor");

-- AddForeignKey
ALTER TABLE "ChangeRequest" ADD CONSTRAINT "ChangeRequest_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "ChangeRequest" ADD CONSTRAINT "ChangeRequest_sessionId_fkey" FOREIGN KEY ("sessionId") REFERENCES "Session"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Trigger" ADD CONSTRAINT "Trigger_projectId_fkey" FOREIGN KEY ("projectId") REFERENCES "Project"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "TriggerRun" ADD CONSTRAINT "TriggerRun_triggerId_fkey" FOREIGN KEY ("triggerId") REFERENCES "Trigger"("id") ON DELETE CASCADE ON UPDATE CASCADE;
