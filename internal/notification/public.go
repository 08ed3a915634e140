package notification

import (
	"net/url"
	"strings"
)

// PublicMask stands in for what PublicRecipient hides.
const PublicMask = "***"

// PublicRecipient is a recipient as a viewer without a token sees it on a
// public dashboard, in every answer and every search: a webhook URL as its
// scheme, its host and a fixed mask (https://hooks.example/***), since a
// receiver may put its secret anywhere after the host, in the user
// information, the path (Slack's and Discord's webhook URLs are all
// path), the query or the fragment, and the mask says nothing of how long
// or how many they are; an email address, a phone number or an endpoint
// id as it is. Anything else that looks like a URL is masked whole.
//
// The history keeps each notification's recipients through it for a
// visitor's search (history.Query.Public): a change to what it shows
// needs a migration that clears that text (public_search), which the
// store then makes again with the new rule.
func PublicRecipient(r string) string {
	u, err := url.Parse(r)
	web := err == nil && (u.Scheme == "http" || u.Scheme == "https")
	switch {
	case web && u.Host != "":
		return u.Scheme + "://" + u.Host + "/" + PublicMask
	case web, strings.Contains(r, "://"):
		return PublicMask
	}
	return r
}
