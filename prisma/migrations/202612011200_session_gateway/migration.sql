-- CreateEnum
CREATE TYPE "ShareLinkMode" AS ENUM ('VIEW_ONLY', 'INTERACTIVE');

-- CreateTable
CREATE TABLE "LlmUsage" (
    "sessionId" UUID NOT NULL,
    "requests" INTEGER NOT NULL DEFAULT 0,
    "inputTokens" BIGINT NOT NULL DEFAULT 0,
    "outputTokens" BIGINT NOT NULL DEFAULT 0,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "LlmUsage_pkey" PRIMARY KEY ("sessionId")
);

-- CreateTable
CREATE TABLE "ShareLink" (
    "id" UUID NOT NULL,
    "sandboxId" UUID NOT NULL,
    "accountId" UUID NOT NULL,
    "port" INTEGER NOT NULL,
    "mode" "ShareLinkMode" NOT NULL,
    "secretHash" TEXT NOT NULL,
    "createdById" UUID,
    "expiresAt" TIMESTAMP(3) NOT NULL,
    "revokedAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "ShareLink_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "ShareLink_secretHash_key" ON "ShareLink"("secretHash");

-- CreateIndex
CREATE INDEX "ShareLink_sandboxId_createdAt_idx" ON "ShareLink"("sandboxId", "createdAt");

-- AddForeignKey
ALTER TABLE "LlmUsage" ADD CONSTRAINT "LlmUsage_sessionId_fkey" FOREIGN KEY ("sessionId") REFERENCES "Session"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "ShareLink" ADD CONSTRAINT "ShareLink_sandboxId_fkey" FOREIGN KEY ("sandboxId") REFERENCES "Sandbox"("id") ON DELETE CASCADE ON UPDATE CASCADE;
