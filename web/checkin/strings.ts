import type { Lang } from '../shared/lang';

/** Every word of the check-in page, in English and Spanish. Question texts are the protocol's own, as written. */
export interface Strings {
  title: string;
  language: string;
  loading: string;
  questionOf: (n: number, total: number) => string;
  back: string;
  next: string;
  saving: string;
  sending: string;
  yes: string;
  no: string;
  scaleHint: (min: number, max: number) => string;
  textHint: string;
  chooseOne: string;
  notSaved: string;
  tooLong: string;
  notesTitle: string;
  notesLabel: string;
  notesHint: string;
  send: string;
  thanks: string;
  noAction: string;
  caseOpened: string;
  reference: string;
  referenceHint: string;
  closeHint: string;
  emergencyTitle: string;
  emergencyText: string;
  call911: string;
  emergencyNotified: string;
  linkUsedTitle: string;
  linkUsed: string;
  linkUnknownTitle: string;
  linkUnknown: string;
  linkMissingTitle: string;
  linkMissing: string;
  busyTitle: string;
  busy: string;
  unavailableTitle: string;
  unavailable: string;
  tryAgain: string;
  urgentHelp: string;
}

export const STRINGS: Record<Lang, Strings> = {
  en: {
    title: 'Your check-in',
    language: 'Language',
    loading: 'Loading your check-in…',
    questionOf: (n, total) => `Question ${n} of ${total}`,
    back: 'Back',
    next: 'Next',
    saving: 'Saving your answer…',
    sending: 'Sending your check-in…',
    yes: 'Yes',
    no: 'No',
    scaleHint: (min, max) => `Choose a number from ${min} (lowest) to ${max} (highest).`,
    textHint: 'Write your answer in your own words. You can leave it empty to skip it.',
    chooseOne: 'Please choose an answer to go on.',
    notSaved: 'Your answer could not be saved. Please check it and try again.',
    tooLong: 'Please keep your answer under 2,000 characters.',
    notesTitle: 'Anything else?',
    notesLabel: 'Is there anything else you want your care team to know? (optional)',
    notesHint: 'You can leave this empty.',
    send: 'Send my check-in',
    thanks: 'Thank you',
    noAction: 'Your answers were sent to your care team. Nothing else is needed from you today.',
    caseOpened: 'Your answers were sent to your care team. Someone from the team will look at them and contact you.',
    reference: 'Your reference',
    referenceHint: 'Keep it in case you contact your care team about this check-in.',
    closeHint: 'You can close this page now.',
    emergencyTitle: 'Call 911 now',
    emergencyText:
      'Your answer suggests you may need emergency care. Call 911 (or your local emergency number) now, or go to the nearest emergency department.',
    call911: 'Call 911',
    emergencyNotified: 'Your care team has been notified. Your check-in stops here.',
    linkUsedTitle: 'This link has already been used',
    linkUsed:
      'Each check-in link works only once, and this one has been used or is no longer valid. If you did not finish your check-in, please contact your care team. Your next check-in will come by email.',
    linkUnknownTitle: 'We could not find this check-in',
    linkUnknown: 'The link may be incomplete. Please open it again from your email, or copy the whole link into the address bar.',
    linkMissingTitle: 'Please open the link from your email',
    linkMissing: 'This page needs the full link from your check-in email. Please open the email and select the link again.',
    busyTitle: 'Please wait a moment',
    busy: 'There were too many attempts in a short time. Please wait a minute and try again.',
    unavailableTitle: 'Something went wrong on our side',
    unavailable: 'We could not reach the check-in service. Please check your connection and try again in a few minutes.',
    tryAgain: 'Try again',
    urgentHelp: 'If you need urgent help, call 911 or your local emergency number.',
  },
  es: {
    title: 'Su cuestionario de seguimiento',
    language: 'Idioma',
    loading: 'Cargando su cuestionario…',
    questionOf: (n, total) => `Pregunta ${n} de ${total}`,
    back: 'Atrás',
    next: 'Siguiente',
    saving: 'Guardando su respuesta…',
    sending: 'Enviando su cuestionario…',
    yes: 'Sí',
    no: 'No',
    scaleHint: (min, max) => `Elija un número del ${min} (lo más bajo) al ${max} (lo más alto).`,
    textHint: 'Escriba su respuesta con sus propias palabras. Puede dejarla vacía para omitirla.',
    chooseOne: 'Elija una respuesta para continuar.',
    notSaved: 'No se pudo guardar su respuesta. Revísela e inténtelo de nuevo.',
    tooLong: 'Su respuesta debe tener menos de 2000 caracteres.',
    notesTitle: '¿Algo más?',
    notesLabel: '¿Hay algo más que quiera decirle a su equipo de atención? (opcional)',
    notesHint: 'Puede dejarlo vacío.',
    send: 'Enviar mi cuestionario',
    thanks: 'Gracias',
    noAction: 'Sus respuestas se enviaron a su equipo de atención. No necesita hacer nada más hoy.',
    caseOpened: 'Sus respuestas se enviaron a su equipo de atención. Alguien del equipo las revisará y se pondrá en contacto con usted.',
    reference: 'Su referencia',
    referenceHint: 'Guárdela por si contacta a su equipo de atención sobre este cuestionario.',
    closeHint: 'Ya puede cerrar esta página.',
    emergencyTitle: 'Llame al 911 ahora',
    emergencyText:
      'Su respuesta indica que puede necesitar atención de emergencia. Llame al 911 (o al número de emergencias de su zona) ahora, o acuda a urgencias.',
    call911: 'Llamar al 911',
    emergencyNotified: 'Hemos avisado a su equipo de atención. Su cuestionario termina aquí.',
    linkUsedTitle: 'Este enlace ya se usó',
    linkUsed:
      'Cada enlace de seguimiento funciona una sola vez, y este ya se usó o ya no es válido. Si no terminó su cuestionario, contacte a su equipo de atención. El próximo le llegará por correo.',
    linkUnknownTitle: 'No encontramos este cuestionario',
    linkUnknown: 'Puede que el enlace esté incompleto. Ábralo de nuevo desde su correo, o copie el enlace completo en la barra de direcciones.',
    linkMissingTitle: 'Abra el enlace desde su correo',
    linkMissing: 'Esta página necesita el enlace completo de su correo de seguimiento. Abra el correo y seleccione el enlace de nuevo.',
    busyTitle: 'Espere un momento',
    busy: 'Hubo demasiados intentos en poco tiempo. Espere un minuto e inténtelo de nuevo.',
    unavailableTitle: 'Algo salió mal de nuestro lado',
    unavailable: 'No pudimos conectar con el servicio. Revise su conexión e inténtelo de nuevo en unos minutos.',
    tryAgain: 'Intentar de nuevo',
    urgentHelp: 'Si necesita ayuda urgente, llame al 911 o al número de emergencias de su zona.',
  },
};
