// The daemon's file-system calls as promises over node:fs's callback API. Importing
// `node:fs/promises` also loads readline, the REPL history and the file watchers (for
// `FileHandle.readLines` and `watch`), about 3 MiB of the idle daemon's resident memory.
import * as fs from 'node:fs';
import { promisify } from 'node:util';

export const mkdir = promisify(fs.mkdir);
export const readdir = promisify(fs.readdir);
export const readFile = promisify(fs.readFile);
export const readlink = promisify(fs.readlink);
export const stat = promisify(fs.stat);
export const statfs = promisify(fs.statfs);
export const writeFile = promisify(fs.writeFile);
