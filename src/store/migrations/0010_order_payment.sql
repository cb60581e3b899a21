-- 0010_order_payment.sql — the payment created at the channel for an order
-- (issue 23, item 1: POST /v1/orders with a pay_method): how it is paid
-- (native, jsapi, h5; precreate, page, wap; payment_intent), the channel's
-- own id of it when the channel gives one before the payment (a JSAPI
-- prepay_id, a PaymentIntent id), and what the buyer's side needs (the
-- answer's "payment" object, JSON text), so that a repeated create answers
-- the same payment without asking the channel again.
ALTER TABLE pay_order ADD COLUMN pay_method TEXT;
ALTER TABLE pay_order ADD COLUMN channel_order_id TEXT;
ALTER TABLE pay_order ADD COLUMN payment TEXT;
