package channel

// Builtin is relay's own channels, in the order help texts show them. A
// new channel of relay's adds itself here; a program that embeds relay,
// or a test, adds its own to these with With.
func Builtin() Set { return NewSet(Email, Webhook, SMS) }
