/** The app's public surface (@apps/patient-pathway): its root module, for the standalone composition root. */
export { PatientPathwayModule } from './patient-pathway.module';
/** Its projections, for the composition roots that rebuild read models (`svc rebuild`). */
export { patientPathwayProjections } from './read-model';
