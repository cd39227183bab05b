// The thread of lib/digitization/extractors/isolated.ts. A worker thread cannot load TypeScript by
// itself on Node 20 (workers do not inherit the tsx loader), so this plain-JavaScript entry
// registers tsx in the thread and then runs the TypeScript extractor.
import { register } from 'tsx/esm/api';

register();
await import('./extract-thread-main.ts');
