/*
 * fault_answer.c — a planned fault's answer (sim_int.h, sim_fault_answer)
 * in the shape of the channel asked: WeChat Pay's error with its message
 * (sim_wechatpay.c), Stripe's error object (sim_stripe.c), or the plain
 * answer of a gateway; above the channels' handlers, whose error forms it
 * uses, and below server.c and sim_alipay.c, which answer with it. The
 * faults themselves are planned and taken in state.c.
 */
#include "sim_int.h"

#include <string.h>
#include <time.h>

int sim_fault_answer(struct sim_call *c, int st)
{
    /* no answer in time: hold the request, then close it (a lost answer
     * where the caller cannot serve the request first; the WeChat Pay and
     * Alipay gateways serve it, then hold their own answer) */
    if (st == PO_SIM_FAULT_HANG || st == PO_SIM_FAULT_LOST) {
        struct timespec ts = {PO_SIM_HANG_MS / 1000, (PO_SIM_HANG_MS % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        return sim_reply(c, 504, "text/plain", "Gateway Timeout", false);
    }
    if (st == PO_SIM_FAULT_GARBLED)
        return sim_reply(c, 200, "application/json", "{\"unexpected\":\"answer\"}", false);
    unsigned status = (unsigned)st;
    bool limited = status == 429;
    if (strncmp(c->path, "/v3/", 4) == 0 && c->fault_code[0])
        return sim_error(c, status, c->fault_code, sim_wx_message(c->fault_code));
    if (strncmp(c->path, "/v3/", 4) == 0)
        return sim_error(c, status, limited ? "FREQUENCY_LIMITED" : "SYSTEM_ERROR",
                         limited ? "频率超限" : "系统错误，请稍后重试");
    if (strncmp(c->path, "/v1/", 4) == 0)
        return po_sim_stripe_error(c, status, NULL);
    return sim_reply(c, status, "text/html", limited ? "Too Many Requests" : "Bad Gateway", false);
}
