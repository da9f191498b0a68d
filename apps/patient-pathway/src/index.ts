/** The app's public surface (@apps/patient-pathway): its root module, for the standalone composition root. */
export { PatientPathwayModule } from './patient-pathway.module';
