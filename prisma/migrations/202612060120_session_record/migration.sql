-- The session record (R-REC-1), sandbox ports and the kept log tail (R-REC-2).
ALTER TABLE "Sandbox" ADD COLUMN "ports" INTEGER[] DEFAULT ARRAY[]::INTEGER[];
ALTER TABLE "Sandbox" ADD COLUMN "portsReportedAt" TIMESTAMP(3);
ALTER TABLE "Sandbox" ADD COLUMN "logTail" TEXT;

CREATE TABLE "SessionRecordMessage" (
    "sessionId" UUID NOT NULL,
    "messageId" TEXT NOT NULL,
    "role" TEXT NOT NULL,
    "error" TEXT,
    "ord" BIGSERIAL NOT NULL,
    "createdAt" TIMESTAMP(3),
    "completedAt" TIMESTAMP(3),
    "updatedAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "SessionRecordMessage_pkey" PRIMARY KEY ("sessionId","messageId")
);
CREATE INDEX "SessionRecordMessage_sessionId_ord_idx" ON "SessionRecordMessage"("sessionId", "ord");
CREATE INDEX "SessionRecordMessage_updatedAt_idx" ON "SessionRecordMessage"("updatedAt");
ALTER TABLE "SessionRecordMessage" ADD CONSTRAINT "SessionRecordMessage_sessionId_fkey"
  FOREIGN KEY ("sessionId") REFERENCES "Session"("id") ON DELETE CASCADE ON UPDATE CASCADE;

CREATE TABLE "SessionRecordPart" (
    "sessionId" UUID NOT NULL,
    "partId" TEXT NOT NULL,
    "messageId" TEXT NOT NULL,
    "data" JSONB NOT NULL,
    "ord" BIGSERIAL NOT NULL,
    "updatedAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "SessionRecordPart_pkey" PRIMARY KEY ("sessionId","partId")
);
CREATE INDEX "SessionRecordPart_sessionId_messageId_ord_idx" ON "SessionRecordPart"("sessionId", "messageId", "ord");
ALTER TABLE "SessionRecordPart" ADD CONSTRAINT "SessionRecordPart_sessionId_fkey"
  FOREIGN KEY ("sessionId") REFERENCES "Session"("id") ON DELETE CASCADE ON UPDATE CASCADE;
