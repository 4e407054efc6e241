-- AlterTable
ALTER TABLE "Sandbox" ADD COLUMN     "serviceHeadersEnc" TEXT,
ADD COLUMN     "expiresAt" TIMESTAMP(3);
