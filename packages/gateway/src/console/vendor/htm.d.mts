// The types of `/admin/vendor/htm.mjs`, which the console router serves from the htm package.
export { default } from "htm";
