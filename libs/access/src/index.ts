/**
 * @svc/access: the gateway's access model (organizations with their members, environments, API
 * keys), written by the gateway's access projection and read by every app's guards.
 */
export * from './documents';
export * from './tenant-directory';
