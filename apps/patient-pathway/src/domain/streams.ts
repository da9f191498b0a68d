import { createHash } from 'node:crypto';

/** Stream names of the patient-pathway (`patient-pathway-<aggregate>-<id>`). Never PHI in them. */
export const STREAM_PREFIX = 'patient-pathway-';
export const protocolStream = (protocolId: string) => `patient-pathway-protocol-${protocolId}`;
/** First-writer-wins claim of a programKey in an environment. */
export const programKeyStream = (environmentId: string, programKey: string) =>
  `patient-pathway-programkey-${environmentId}-${createHash('sha256').update(programKey).digest('hex').slice(0, 40)}`;
/** First-writer-wins patientId of a (environment, keyed hash of the external ID). */
export const identityStream = (environmentId: string, externalIdHash: string) => `patient-pathway-identity-${environmentId}-${externalIdHash}`;
/** First-writer-wins claim of a lifecycle eventId (body hash) in an environment. */
export const eventIdStream = (environmentId: string, eventId: string) => `patient-pathway-eventid-${environmentId}-${eventId}`;
export const patientStream = (patientId: string) => `patient-pathway-patient-${patientId}`;
export const checkInStream = (checkInId: string) => `patient-pathway-checkin-${checkInId}`;
export const CHECK_IN_STREAM_PREFIX = 'patient-pathway-checkin-';
