import type { Voice } from '../../generated/prisma/client.js';
import type { Db } from '../platform/db.js';
import type { PartnerVoice, PartnerVoiceSource } from '../speech/index.js';
import { isUuid } from '../platform/ids.js';

/**
 * A partner's voices as /v2/audio/speech sees them (PartnerVoiceSource of lib/speech/voices.ts). A
 * voice can be spoken once it has an embedding: by the remote speech model (SPEECH_MODEL) under the
 * voice id the GPU job returned, or locally by the built-in voice nearest to its voice print. That
 * local voice is a stand-in chosen by similarity, not a clone: no local engine can clone a voice.
 */
function asPartnerVoice(v: Pick<Voice, 'name' | 'embeddingEngine' | 'embeddingStatus' | 'embeddingError' | 'builtInVoice' | 'remoteVoiceId'>): PartnerVoice {
  const embedded = v.embeddingEngine !== null;
  const reason = embedded
    ? undefined
    : v.embeddingStatus === 'in_progress'
      ? 'its first embedding is in progress'
      : v.embeddingStatus === 'failed'
        ? `its embedding failed (${v.embeddingError ?? 'no reason recorded'})`
        : 'it has no embedding yet (POST /api/voices/{partner}/{voice}/embed)';
  return { name: v.name, ready: embedded, reason, builtInVoice: v.builtInVoice, remoteVoiceId: v.remoteVoiceId };
}

export function partnerVoiceSource(db: Db): PartnerVoiceSource {
  return {
    async list(partnerId) {
      return (await db.voice.findMany({ where: { partnerId }, orderBy: { name: 'asc' } })).map(asPartnerVoice);
    },
    async find(partnerId, nameOrId) {
      const v =
        (await db.voice.findUnique({ where: { partnerId_name: { partnerId, name: nameOrId } } })) ??
        (isUuid(nameOrId) ? await db.voice.findFirst({ where: { id: nameOrId.toLowerCase(), partnerId } }) : null);
      return v ? asPartnerVoice(v) : null;
    },
  };
}
