package channel

// registry lists relay's channels, in the order help texts show them. A
// new channel adds itself here.
var registry = []Channel{Email, Webhook, SMS}
