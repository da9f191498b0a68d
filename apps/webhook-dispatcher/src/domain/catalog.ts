/** The subscribable event catalog (spec "Events"); order_lookup.requested is a call, not an event. */
export const CaseEventTypes = [
  'clinical_case.opened',
  'clinical_case.patient_message_created',
  'clinical_case.acknowledged',
  'clinical_case.resolved',
] as const;
export const AccountEventTypes = ['billing.usage_threshold_reached', 'subscription.updated'] as const;
export const SubscribableEvents = [...CaseEventTypes, ...AccountEventTypes] as const;
export type SubscribableEvent = (typeof SubscribableEvents)[number];

export const isCaseEvent = (type: string): boolean => (CaseEventTypes as readonly string[]).includes(type);
export const isAccountEvent = (type: string): boolean => (AccountEventTypes as readonly string[]).includes(type);

/** Every stream of this context starts with this. */
export const STREAM_PREFIX = 'webhook-dispatcher-';
