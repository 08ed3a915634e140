package notification

import "testing"

func TestPublicRecipient(t *testing.T) {
	for in, want := range map[string]string{
		"ada@example.com":               "ada@example.com",
		"+15555550100":                  "+15555550100",
		"ep_3kq7ymzd5vbxw2n4c6f7h2j4la": "ep_3kq7ymzd5vbxw2n4c6f7h2j4la",
		"https://hooks.example":         "https://hooks.example/***",
		"https://hooks.example/":        "https://hooks.example/***",
		"https://hooks.example/in":      "https://hooks.example/***",
		"https://hooks.example/services/T000/B000/XXXXsecretpath": "https://hooks.example/***",
		"https://discord.example/api/webhooks/1234/s3cr3t-t0ken":  "https://discord.example/***",
		"https://hooks.example/in?tok=s":                          "https://hooks.example/***",
		"https://u:p@hooks.example:8443/in#frag":                  "https://hooks.example:8443/***",
		"http://hooks.example/in?":                                "http://hooks.example/***",
		"HTTPS://Hooks.Example/Secret":                            "https://Hooks.Example/***",
		"http://[::1]:9000/secret":                                "http://[::1]:9000/***",
		"https://hooks.example/%zz?tok=s":                         "***",
		"https:///secret":                                         "***",
		"https:secret":                                            "***",
		"ftp://files.example/secret":                              "***",
	} {
		if got := PublicRecipient(in); got != want {
			t.Errorf("PublicRecipient(%q) = %q, want %q", in, got, want)
		}
	}
}
