/** Domain types that more than one context uses: defined once, here. */

/** The two environments every organization has. */
export type EnvironmentKind = 'sandbox' | 'production';

/** Where a clinical case came from. */
export type CaseSource = 'check_in' | 'patient_concern' | 'staff_chat';

/** A clinical case's priority. */
export type CasePriority = 'emergency' | 'urgent' | 'routine';
