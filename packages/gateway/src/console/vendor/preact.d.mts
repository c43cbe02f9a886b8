// The types of `/admin/vendor/preact.mjs`, which the console router serves from the preact package.
export * from "preact";
