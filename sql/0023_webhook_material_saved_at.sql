-- When a row of webhook_material was saved is the database's word, not the writer's. `serve`'s role may write this
-- table (PayPal's certificates, the sender groups it trusts), and `WebhookMaterial.load` reads the newest first: a
-- compromised serve must not date rows into the future so that they are loaded first for ever after, and the
-- genuine ones not at all. (serve's role has no UPDATE on saved_at; this trigger sets it on every write.)
UPDATE webhook_material SET saved_at = now() WHERE saved_at > now();
CREATE FUNCTION webhook_material_saved_now() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.saved_at := now();
    RETURN NEW;
END $$;
CREATE TRIGGER webhook_material_saved_now BEFORE INSERT OR UPDATE ON webhook_material
    FOR EACH ROW EXECUTE FUNCTION webhook_material_saved_now();
