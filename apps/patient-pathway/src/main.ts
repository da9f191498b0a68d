import 'reflect-metadata';
import { runService } from '@svc/platform';
import { PatientPathwayModule } from './patient-pathway.module';

void runService('patient-pathway', [PatientPathwayModule]);
