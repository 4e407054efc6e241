export function nodeFloor(): { major: number; minor: number };
export function nodeVersionProblem(version: string, floor?: { major: number; minor: number }): string | null;
