import { z } from 'zod';
import { pageOf } from '../../core/schemas/common.js';
import { Callback, CallbackDelivery } from '../../core/webhooks/callback-schemas.js';
import { ConversationParams } from '../route-schemas.js';

/** The pages and path parameters of the callback routes. */
export const CallbackPage = pageOf(Callback, 'CallbackPage');
export const CallbackDeliveryPage = pageOf(CallbackDelivery, 'CallbackDeliveryPage');
export const CallbackParams = ConversationParams.extend({ callback_id: z.uuid().describe('Callback id') });
