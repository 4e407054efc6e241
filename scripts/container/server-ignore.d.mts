export const IGNORE_FILE: string;
export const APP_PATHS: string[];
export function externalPackages(): string[];
export function ignoreFileText(): string;
