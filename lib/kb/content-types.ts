/** Rewrite content types (spec 2.6); `auto` picks one from the document's source. */
export const contentTypes = [
  { id: 'auto', name: 'Auto-detect' },
  { id: 'article', name: 'Article' },
  { id: 'video', name: 'Video' },
  { id: 'book', name: 'Book' },
];
