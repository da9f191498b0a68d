import { Definition } from './definition';

export interface WorkflowTemplate {
  key: string;
  name: string;
  stableKey: string;
  description: string;
  definition: Definition;
}

/** The "Order status and tracking" template (spec order_lookup.requested: POST /orders/lookup). */
export function orderStatusTemplate(destinationStableKey = 'order_system'): WorkflowTemplate {
  return {
    key: 'order_status_tracking',
    name: 'Order status and tracking',
    stableKey: 'order_status',
    description: 'Shows a signed-in patient their latest orders (English and Spanish); offers the team when it cannot check.',
    definition: {
      schema: 2,
      category: 'fulfillment',
      description: 'Order status and tracking for signed-in patients',
      triggerPhrases: [
        'where is my order',
        "where's my order",
        'order status',
        'track my order',
        'tracking number',
        'my package',
        'donde esta mi pedido',
        'estado de mi pedido',
        'rastrear mi pedido',
        'mi paquete',
      ],
      excludePhrases: ['cancel my order', 'cancelar mi pedido'],
      steps: [
        {
          id: 'lookup',
          type: 'call_api',
          destinationStableKey,
          method: 'POST',
          path: '/orders/lookup',
          readOnly: true,
          contract: 'orders_v1',
          save: [],
          notFoundReply: "I couldn't find any orders for you. Would you like me to connect you with our team?",
          errorReply: "I couldn't check your orders right now. Would you like me to connect you with our team?",
        },
        { id: 'done', type: 'reply', message: 'Here are your latest orders. Anything else? Just ask for our team if you need more help.' },
      ],
    },
  };
}
