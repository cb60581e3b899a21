/*
 * test_egress.c — the egress policy (src/channel/egress.c) as a table:
 * every address class a tenant's webhook URL could reach inside a
 * network (loopback in every spelling, private ranges, link-local and the
 * cloud metadata address, carrier-grade NAT, multicast, unspecified,
 * reserved, IPv6 forms that embed an IPv4 address) is refused, public
 * addresses pass, and the operator's allow-list lets exactly its networks
 * through. Nothing here connects anywhere: po_egress_url_ok judges a URL
 * without resolving it, and po_http_post is only called with URLs the
 * policy refuses (it must answer before any connection).
 */
#include "../../src/channel/channel.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

static const struct po_egress_policy strict = {0};

/* URLs that no tenant may register under the default policy. */
static const char *const refused[] = {
    "https://127.0.0.1/",
    "https://127.255.255.254:8443/x",
    "https://2130706433/",
    "https://0x7f000001/",
    "https://0x7f.0.0.1/",
    "https://0177.0.0.1/",
    "https://017700000001/",
    "https://127.1/",
    "https://[::1]/",
    "https://[0:0:0:0:0:0:0:1]/",
    "https://[::ffff:127.0.0.1]/",
    "https://[::ffff:7f00:1]/",
    "https://[::127.0.0.1]/",
    "https://[64:ff9b::127.0.0.1]/",
    "https://[64:ff9b::a9fe:a9fe]/",
    "https://[2002:7f00:1::]/",
    "https://[2002:c0a8:101::]/",
    /* issue 44 item 6: SIIT, NAT64 local-use, Teredo carrying internal IPv4 */
    "https://[::ffff:0:7f00:1]/",
    "https://[::ffff:0:127.0.0.1]/",
    "https://[::ffff:0:a9fe:a9fe]/",
    "https://[::ffff:0:808:808]/", /* a translation: refused whatever it carries */
    "https://[64:ff9b::7f00:1]/",
    "https://[64:ff9b::10.0.0.1]/",
    "https://[64:ff9b:1:7f00:0:100::]/",    /* 64:ff9b:1::/48 carrying 127.0.0.1 */
    "https://[64:ff9b:1:a9fe:a9:fe00::]/",  /* 169.254.169.254 */
    "https://[64:ff9b:1:808:8:800::]/",     /* local-use: refused whatever it carries */
    "https://[2001:0:7f00:1::]/",           /* Teredo, server 127.0.0.1 */
    "https://[2001:0:808:808::3f57:fefe]/", /* Teredo, client 192.168.1.1 (inverted) */
    "https://[2001:0:808:808::80ff:fffe]/", /* Teredo, client 127.0.0.1 */
    "https://0.0.0.0/",
    "https://0/",
    "https://[::]/",
    "https://10.0.0.1/",
    "https://10.255.255.255/",
    "https://172.16.0.1/",
    "https://172.31.255.1/",
    "https://192.168.1.1/",
    "https://100.64.0.1/",
    "https://100.127.255.255/",
    "https://169.254.169.254/latest/meta-data/",
    "https://169.254.0.1/",
    "https://[fe80::1]/",
    "https://[fe80::1%25eth0]/",
    "https://[fd00::1]/",
    "https://[fc00::1]/",
    "https://[fec0::1]/",
    "https://224.0.0.1/",
    "https://239.255.255.250/",
    "https://[ff02::1]/",
    "https://240.0.0.1/",
    "https://255.255.255.255/",
    "https://198.18.0.1/",
    "https://192.0.0.8/",
    "https://[2001:db8::1]/",
    "https://localhost/",
    "https://LOCALHOST./",
    "https://api.localhost/",
    "https://user:pw@example.com/",
    "https://127.0.0.1:1@127.0.0.2/",
    "https://example.com@127.0.0.1/",
    "http://example.com/",
    "http://127.0.0.1/",
    "ftp://example.com/",
    "file:///etc/passwd",
    "gopher://127.0.0.1:6379/_INFO",
    "https://",
    "https://exa mple.com/",
    "https://example.com:0/",
    "https://example.com:70000/",
    "",
};

static const char *const accepted[] = {
    "https://example.com/hooks",
    "https://example.com:8443/hooks?x=1",
    "https://8.8.8.8/",
    "https://[2606:4700:4700::1111]/",
    "https://172.32.0.1/",                  /* just outside 172.16/12 */
    "https://100.128.0.1/",                 /* just outside 100.64/10 */
    "https://[2002:808:808::]/",            /* 6to4 of a public address */
    "https://[2001:0:808:808::f7f7:f7f7]/", /* Teredo, server and client public */
    "https://hooks.tenant.example/payonce",
};

static void refused_urls(void **state)
{
    (void)state;
    char err[PO_ERRBUF_SIZE];
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        err[0] = '\0';
        if (po_egress_url_ok(&strict, refused[i], err, sizeof err))
            fail_msg("accepted: %s", refused[i]);
        assert_true(err[0] != '\0');
    }
}

static void accepted_urls(void **state)
{
    (void)state;
    char err[PO_ERRBUF_SIZE] = "";
    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++)
        if (!po_egress_url_ok(&strict, accepted[i], err, sizeof err))
            fail_msg("refused: %s (%s)", accepted[i], err);
}

static void classes(void **state)
{
    (void)state;
    unsigned char a[16] = {0};
    a[10] = a[11] = 0xff;
    a[12] = 169, a[13] = 254, a[14] = 169, a[15] = 254;
    assert_int_equal(po_egress_classify(a), PO_EGRESS_LINK_LOCAL);
    a[12] = 127, a[13] = 0, a[14] = 0, a[15] = 1;
    assert_int_equal(po_egress_classify(a), PO_EGRESS_LOOPBACK);
    a[12] = 93, a[13] = 184, a[14] = 216, a[15] = 34;
    assert_int_equal(po_egress_classify(a), PO_EGRESS_PUBLIC);
    unsigned char v6[16] = {0};
    v6[15] = 1;
    assert_int_equal(po_egress_classify(v6), PO_EGRESS_LOOPBACK);
    v6[15] = 0;
    assert_int_equal(po_egress_classify(v6), PO_EGRESS_UNSPECIFIED);
}

/* Development allows loopback (and http:// to it), nothing else; the
 * allow-list opens exactly its networks. */
static void allowances(void **state)
{
    (void)state;
    char err[PO_ERRBUF_SIZE] = "";
    struct po_egress_policy dev, onprem;
    assert_int_equal(po_egress_policy_parse("", true, &dev, err, sizeof err), PO_OK);
    assert_true(po_egress_url_ok(&dev, "http://127.0.0.1:8080/hook", err, sizeof err));
    assert_true(po_egress_url_ok(&dev, "http://localhost/hook", err, sizeof err));
    assert_true(po_egress_url_ok(&dev, "https://[::1]/hook", err, sizeof err));
    assert_false(po_egress_url_ok(&dev, "http://10.0.0.1/hook", err, sizeof err));
    assert_false(po_egress_url_ok(&dev, "https://169.254.169.254/", err, sizeof err));
    assert_false(po_egress_url_ok(&dev, "http://127.0.0.1:1@127.0.0.2/", err, sizeof err));
    assert_int_equal(po_egress_policy_parse("10.2.0.0/16, fd12::/16 192.168.7.9", false, &onprem,
                                            err, sizeof err),
                     PO_OK);
    assert_int_equal(onprem.nallow, 3);
    assert_true(po_egress_url_ok(&onprem, "https://10.2.3.4/h", err, sizeof err));
    assert_false(po_egress_url_ok(&onprem, "https://10.3.0.1/h", err, sizeof err));
    assert_true(po_egress_url_ok(&onprem, "https://[fd12::5]/h", err, sizeof err));
    assert_false(po_egress_url_ok(&onprem, "https://[fd13::5]/h", err, sizeof err));
    assert_true(po_egress_url_ok(&onprem, "https://192.168.7.9/h", err, sizeof err));
    assert_false(po_egress_url_ok(&onprem, "https://192.168.7.10/h", err, sizeof err));
    assert_false(po_egress_url_ok(&onprem, "https://127.0.0.1/h", err, sizeof err));
    /* Bad lists are refused with a reason and leave nothing allowed. */
    assert_int_equal(po_egress_policy_parse("10.0.0.0/33", false, &onprem, err, sizeof err),
                     PO_ERR_INVALID);
    assert_int_equal(onprem.nallow, 0);
    assert_int_equal(po_egress_policy_parse("nonsense", false, &onprem, err, sizeof err),
                     PO_ERR_INVALID);
    assert_non_null(strstr(err, "nonsense"));
}

/* The send refuses before connecting: a refused class or a bad URL is
 * answered without a status, as a class, with the detail for the log. */
static void send_refuses_first(void **state)
{
    (void)state;
    static const char *const urls[] = {"https://169.254.169.254/latest/", "https://10.9.8.7/",
                                       "https://[fd00::1]/", "http://example.com/",
                                       "https://u:p@example.com/"};
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        struct po_egress_result r;
        assert_int_equal(po_http_post(&strict, urls[i], NULL, 0, "{}", 1000, &r), PO_OK);
        if (r.error != PO_EGRESS_REFUSED && r.error != PO_EGRESS_BAD_URL)
            fail_msg("%s: not refused (%d)", urls[i], (int)r.error);
        assert_int_equal(r.status, 0);
        assert_true(strlen(po_egress_error_text(r.error)) > 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(refused_urls),
        cmocka_unit_test(accepted_urls),
        cmocka_unit_test(classes),
        cmocka_unit_test(allowances),
        cmocka_unit_test(send_refuses_first),
    };
    return cmocka_run_group_tests_name("egress", tests, NULL, NULL);
}
