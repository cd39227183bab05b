/**
 * The upload formats of the knowledge-base spec (section 4.3), grouped by how they are digitized.
 * Every list of extensions in the code base is derived from these.
 */
const documentExtensions = [
  'pdf', 'docx', 'pptx', 'xlsx', 'epub', 'html', 'htm', 'csv', 'json', 'xml', 'yaml', 'yml',
  'txt', 'md', 'markdown', 'py', 'js', 'css', 'doc', 'xls', 'ppt',
] as const;
/** Read by OCR. */
const imageExtensions = ['jpg', 'jpeg', 'png', 'tif', 'tiff', 'gif', 'webp'] as const;
/** Transcribed; partners with allow_audio_video=false may not upload them. */
const audioVideoExtensions = ['mp3', 'wav', 'm4a', 'mp4', 'mov', 'm4v', 'avi'] as const;
/** Digitized exactly as written. */
const plainTextExtensions = ['txt', 'md', 'markdown', 'py', 'js', 'css'] as const;
/** Archives are refused under any extension: upload the files inside. */
export const blockedArchiveExtensions = ['zip', 'tar', 'gz', 'tgz', 'rar', '7z', 'bz2', 'xz'] as const;

export const supportedExtensions: readonly string[] = [...documentExtensions, ...audioVideoExtensions, ...imageExtensions];

const member = (list: readonly string[]) => (extension: string) => list.includes(extension.replace(/^\./, '').toLowerCase());
export const isImage = member(imageExtensions);
export const isAudioVideo = member(audioVideoExtensions);
export const isPlainText = member(plainTextExtensions);
