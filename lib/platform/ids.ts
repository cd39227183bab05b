/** A UUID's text form (any version, either case): the ids this service hands out. */
export const uuidText = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

const uuidOnly = new RegExp(`^${uuidText}$`, 'i');

/** Whether `text` is a UUID: checked before a lookup by id, which PostgreSQL's uuid column would refuse with an error. */
export const isUuid = (text: string): boolean => uuidOnly.test(text);

/**
 * The uuid of an id that the service hands out as its own path (`/v2/transcript/<uuid>`): a client
 * that fills the documented `{id}` with it percent-encoded sends `%2Fv2%2Ftranscript%2F<uuid>`,
 * which arrives decoded as the whole path. Any other text is returned as it came.
 */
export const idWithoutPath = (id: string, pathOf: (id: string) => string): string => {
  const prefix = pathOf('');
  return id.startsWith(prefix) ? id.slice(prefix.length) : id;
};
