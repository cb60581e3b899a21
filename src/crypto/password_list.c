/*
 * password_list.c — the passwords people choose most (the heads of the
 * published breach-corpus lists: NCSC's top 100k, SplashData's yearly
 * lists, the RockYou leak), lower case, without the digits and symbols
 * people put around them: po_password_policy refuses a password that is
 * one of them once its own ends are stripped and its leetspeak undone
 * ("P@ssw0rd2024!" is "password"). cracklib's dictionary does not hold
 * them all (it lets "password1234" through).
 */
#include "crypto_int.h"

#include <string.h>

static const char *const common[] = {
    "password",    "qwerty",        "qwertyuiop",   "asdfghjkl",  "zxcvbnm",    "iloveyou",
    "admin",       "administrator", "welcome",      "letmein",    "monkey",     "dragon",
    "football",    "baseball",      "basketball",   "soccer",     "hockey",     "master",
    "sunshine",    "princess",      "shadow",       "superman",   "batman",     "michael",
    "jennifer",    "jordan",        "hunter",       "harley",     "ranger",     "buster",
    "thomas",      "robert",        "charlie",      "daniel",     "jessica",    "ashley",
    "nicole",      "matthew",       "andrew",       "joshua",     "anthony",    "william",
    "starwars",    "trustno",       "whatever",     "freedom",    "secret",     "access",
    "login",       "passw",         "passwd",       "pass",       "changeme",   "default",
    "computer",    "internet",      "mustang",      "ferrari",    "porsche",    "corvette",
    "killer",      "pepper",        "ginger",       "cookie",     "cheese",     "chocolate",
    "summer",      "winter",        "spring",       "autumn",     "flower",     "orange",
    "banana",      "apple",         "lovely",       "loveme",     "lover",      "love",
    "hello",       "hellokitty",    "hottie",       "sexy",       "angel",      "babygirl",
    "blink",       "biteme",        "maggie",       "tigger",     "snoopy",     "pokemon",
    "naruto",      "liverpool",     "chelsea",      "arsenal",    "manchester", "barcelona",
    "yankees",     "cowboys",       "eagles",       "lakers",     "jordan",     "golf",
    "silver",      "golden",        "diamond",      "crystal",    "matrix",     "phoenix",
    "zaq",         "qazwsx",        "qwe",          "asd",        "zxc",        "abc",
    "abcdef",      "abcdefg",       "abcdefgh",     "azerty",     "qwertz",     "test",
    "tester",      "testing",       "guest",        "user",       "root",       "toor",
    "oracle",      "mysql",         "postgres",     "server",     "database",   "system",
    "manager",     "support",       "service",      "office",     "company",    "business",
    "money",       "million",       "rich",         "payment",    "payonce",    "wechat",
    "alipay",      "stripe",        "bank",         "finance",    "account",    "ledger",
    "monday",      "friday",        "sunday",       "january",    "december",   "christmas",
    "jesus",       "god",           "heaven",       "blessed",    "faith",      "happy",
    "smile",       "family",        "mother",       "father",     "sister",     "brother",
    "friend",      "friends",       "forever",      "together",   "beautiful",  "pretty",
    "cute",        "sweet",         "sweetie",      "honey",      "sugar",      "candy",
    "purple",      "yellow",        "green",        "blue",       "black",      "white",
    "red",         "rainbow",       "butterfly",    "tiger",      "lion",       "bear",
    "wolf",        "eagle",         "falcon",       "shark",      "dolphin",    "horse",
    "cat",         "dog",           "puppy",        "kitty",      "bubbles",    "buddy",
    "rocky",       "lucky",         "jack",         "daisy",      "bailey",     "molly",
    "max",         "sam",           "samsung",      "iphone",     "google",     "facebook",
    "microsoft",   "windows",       "linux",        "ubuntu",     "debian",     "apple",
    "nothing",     "unknown",       "nopass",       "nopassword", "mypassword", "mypass",
    "yourpass",    "letmein",       "openup",       "opensesame", "sesame",     "enter",
    "master",      "masterkey",     "key",          "keys",       "lock",       "unlock",
    "welcomehome", "qwerasdf",      "asdfasdf",     "qweqwe",     "aaa",        "zzz",
    "iloveu",      "loveyou",       "trust",        "trustme",    "believe",    "power",
    "superstar",   "star",          "rockstar",     "player",     "gamer",      "ninja",
    "samurai",     "warrior",       "knight",       "wizard",     "magic",      "merlin",
    "hacker",      "hack",          "cyber",        "security",   "secure",     "safety",
    "private",     "personal",      "confidential", "topsecret",  "classified", "hidden",
};

bool po_password_is_common(const char *core)
{
    for (size_t i = 0; i < sizeof common / sizeof common[0]; i++)
        if (strcmp(core, common[i]) == 0)
            return true;
    return false;
}
