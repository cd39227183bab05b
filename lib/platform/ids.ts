/** A UUID's text form (any version, either case): the ids this service hands out. */
export const uuidText = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

const uuidOnly = new RegExp(`^${uuidText}$`, 'i');

/** Whether `text` is a UUID: checked before a lookup by id, which PostgreSQL's uuid column would refuse with an error. */
export const isUuid = (text: string): boolean => uuidOnly.test(text);
