/** The service's emergency words: one list for every context (libs/clinical). */
export { emergencyKinds } from '@svc/clinical';
